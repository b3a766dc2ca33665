# Plots of `twinserve plan` (docs/plan.md). Built into the binary; the plan
# command writes it to OUT/plan.gp and runs
#   gnuplot -e "dir='OUT'" OUT/plan.gp
# Reads OUT/plan.csv and OUT/pareto.csv; writes OUT/frontier.svg (cost per
# hour against the latency metric, every sized candidate, the Pareto front
# joined) and OUT/capacity.svg (capacity of one replica per configuration).
if (!exists("dir")) dir = "."
set datafile separator comma
set datafile missing ""
# Columns by their header's name (plan.csv gains columns as the plan grows).
set datafile columnheaders
# noenhanced: labels are names such as least_outstanding, which gnuplot's
# enhanced text would render with a subscript.
set terminal svg size 900,560 dynamic noenhanced font "sans,11" background rgb "white"
set grid
set key top right

set output dir."/frontier.svg"
set title "Cost against latency: every candidate that meets the SLOs, Pareto front joined"
set xlabel "latency at the chosen point (ms, the plan's latency metric)"
set ylabel "cost ($ per hour)"
set yrange [0:*]
ok(x) = strcol("status") eq "ok" ? x : NaN
plot dir."/plan.csv" using (ok(column("latency_ms"))):(ok(column("cost_per_hour"))) \
       with points pt 7 ps 0.8 lc rgb "#7f7f7f" title "candidates", \
     dir."/pareto.csv" using "latency_ms":"cost_per_hour" with linespoints pt 7 ps 1.2 lw 2 lc rgb "#1f77b4" title "Pareto front", \
     dir."/pareto.csv" using "latency_ms":"cost_per_hour":(strcol("label")) with labels offset 1,0.8 left font ",8" notitle

set output dir."/capacity.svg"
set title "Capacity of one replica (highest rate meeting the SLOs)"
set xlabel ""
set ylabel "requests per second"
# From 0: a bar's height is the capacity, so bars compare by length.
set yrange [0:*]
set style fill solid 0.7
set boxwidth 0.7
set xtics rotate by -45 left font ",8" nomirror
set bmargin 12
set key off
plot dir."/plan.csv" using 0:"capacity_rps":xtic(strcol("label")) with boxes lc rgb "#2ca02c" notitle
