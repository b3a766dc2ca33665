# Plots of `twinserve plan` (docs/plan.md). Built into the binary; the plan
# command writes it to OUT/plan.gp and runs
#   gnuplot -e "dir='OUT'" OUT/plan.gp
# Reads OUT/plan.csv and OUT/pareto.csv; writes OUT/frontier.svg (cost per
# hour against the latency metric, every sized candidate, the Pareto front
# joined) and OUT/capacity.svg (capacity of one replica per configuration).
if (!exists("dir")) dir = "."
set datafile separator comma
set datafile missing ""
set terminal svg size 900,560 dynamic enhanced font "sans,11" background rgb "white"
set grid
set key top right

# plan.csv columns: 3 label, 11 status, 12 capacity_rps, 15 cost_per_hour, 17 latency_ms
set output dir."/frontier.svg"
set title "Cost against latency: every candidate that meets the SLOs, Pareto front joined"
set xlabel "latency at the chosen point (ms, the plan's latency metric)"
set ylabel "cost ($ per hour)"
plot dir."/plan.csv" skip 1 using (strcol(11) eq "ok" ? $17 : NaN):(strcol(11) eq "ok" ? $15 : NaN) \
       with points pt 7 ps 0.8 lc rgb "#7f7f7f" title "candidates", \
     dir."/pareto.csv" skip 1 using 4:3 with linespoints pt 7 ps 1.2 lw 2 lc rgb "#1f77b4" title "Pareto front", \
     dir."/pareto.csv" skip 1 using 4:3:2 with labels offset 1,0.8 left font ",8" notitle

set output dir."/capacity.svg"
set title "Capacity of one replica (highest rate meeting the SLOs)"
set xlabel ""
set ylabel "requests per second"
set style fill solid 0.7
set boxwidth 0.7
set xtics rotate by -45 left font ",8" nomirror
set bmargin 12
set key off
plot dir."/plan.csv" skip 1 using 0:($12):xtic(3) with boxes lc rgb "#2ca02c" notitle
