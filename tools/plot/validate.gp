# Plots of one load of a `twinserve validate` run (docs/validate.md).
# twinserve writes this script into its --out folder as plots.gp and runs
#   gnuplot -e "dir='load_0.30'" plots.gp
# there for each load; rerun it by hand the same way to restyle a plot.
# Inputs in dir: requests.dat (per request, ms: id, TTFT measured /
# calibrated / roofline, E2EL measured / calibrated / roofline, TPOT measured
# / calibrated / roofline) and steps.dat (per engine step: batch size, new
# tokens, composition 0 decode-only 1 prefill-only 2 mixed, step ms measured
# / calibrated / roofline, error % calibrated / roofline).
if (!exists("dir")) dir = "."
set terminal svg size 1100,480 dynamic noenhanced font "sans,11"
set datafile missing "nan"
set key top left
set grid

# Predicted against measured, per request; on the diagonal is exact.
set output dir."/scatter.svg"
set multiplot layout 1,2 title "Per request: predicted vs measured (".dir.")"
set xlabel "measured TTFT (ms)"
set ylabel "predicted TTFT (ms)"
plot dir."/requests.dat" using 2:3 with points pt 7 ps 0.5 title "calibrated", \
     "" using 2:4 with points pt 6 ps 0.5 title "roofline", \
     x with lines dt 2 lc rgb "gray" title "y = x"
set xlabel "measured E2EL (ms)"
set ylabel "predicted E2EL (ms)"
plot dir."/requests.dat" using 5:6 with points pt 7 ps 0.5 title "calibrated", \
     "" using 5:7 with points pt 6 ps 0.5 title "roofline", \
     x with lines dt 2 lc rgb "gray" title "y = x"
unset multiplot

# Latency CDFs: measured and both predictions.
set output dir."/cdf.svg"
set multiplot layout 1,2 title "Latency CDFs (".dir.")"
set key bottom right
set ylabel "fraction of requests"
set yrange [0:1]
set xlabel "TTFT (ms)"
plot dir."/requests.dat" using 2:(1.0) smooth cnormal lw 2 title "measured", \
     "" using 3:(1.0) smooth cnormal title "calibrated", \
     "" using 4:(1.0) smooth cnormal dt 2 title "roofline"
set xlabel "E2EL (ms)"
plot dir."/requests.dat" using 5:(1.0) smooth cnormal lw 2 title "measured", \
     "" using 6:(1.0) smooth cnormal title "calibrated", \
     "" using 7:(1.0) smooth cnormal dt 2 title "roofline"
unset multiplot
set autoscale y

# Step-time error on the engine's own steps, against batch size.
set output dir."/step_error.svg"
set multiplot layout 1,2 title "Step time: (predicted - measured) / measured (".dir.")"
set key top right
set xlabel "batch size (seqs)"
set ylabel "error (%)"
set title "calibrated"
plot dir."/steps.dat" using ($3==0?$1:1/0):7 with points pt 7 ps 0.5 title "decode-only", \
     "" using ($3==1?$1:1/0):7 with points pt 5 ps 0.5 title "prefill-only", \
     "" using ($3==2?$1:1/0):7 with points pt 9 ps 0.5 title "mixed", \
     0 with lines dt 2 lc rgb "gray" notitle
set title "roofline"
plot dir."/steps.dat" using ($3==0?$1:1/0):8 with points pt 7 ps 0.5 title "decode-only", \
     "" using ($3==1?$1:1/0):8 with points pt 5 ps 0.5 title "prefill-only", \
     "" using ($3==2?$1:1/0):8 with points pt 9 ps 0.5 title "mixed", \
     0 with lines dt 2 lc rgb "gray" notitle
unset multiplot
