# plot_pyramid.gp - draws the figure of plot_pyramid.sh from its data file
# (columns: layer, share at ratio 1, share at ratio 4, retained mass at
# ratio 1, retained mass at ratio 4, attention entropy). Call with
# -e "datafile='...'; outfile='...'".
set terminal pngcairo size 900,720 font ",11"
set output outfile
set multiplot layout 2,1 title "funnel profile, 32 layers, budget 512: uniform (ratio 1) vs pyramid (ratio 4)"
set grid ytics
set key top right
set xrange [-0.5:31.5]
set xtics 0,4,31
set style fill solid 0.5 border -1
set boxwidth 0.4

set ylabel "positions kept (share)"
set yrange [0:*]
plot datafile using ($1-0.2):2 with boxes lc rgb "#4477aa" title "ratio 1 (uniform)", \
     datafile using ($1+0.2):3 with boxes lc rgb "#cc6677" title "ratio 4 (pyramid)"

set xlabel "layer (0 = shallow, broad; 31 = deep, concentrated)"
set ylabel "retained attention mass"
set yrange [*:1]
set y2label "attention entropy (nats)"
set y2tics
set ytics nomirror
plot datafile using 1:4 with linespoints pt 7 lc rgb "#4477aa" title "ratio 1 (uniform)", \
     datafile using 1:5 with linespoints pt 5 lc rgb "#cc6677" title "ratio 4 (pyramid)", \
     datafile using 1:6 axes x1y2 with lines dt 2 lc rgb "#777777" title "entropy (right axis)"
unset multiplot
