# bench/lib/plots.gp -- the PNG plots of bench/ab.  Called by plots.sh as
#   gnuplot -e "dir='OUT'; term='pngcairo'; gpu=0; gbps=25" plots.gp
# Inputs (written by ab_collect.py and codecs_collect.py):
#   plot_bytes.dat    label A_MB B_MB                     -> ab_bytes.png
#   plot_speedup.dat  saved_fraction speedup label        -> ab_speedup.png
#   plot_codecs.dat   data_set ibp zstd1 zstd3 lz4 zstd3_file lz4_file
#                     (space saved, %)                    -> codecs_saved.png

if (term eq 'pngcairo') {
  set terminal pngcairo size 1100,620 font "DejaVu Sans,10" noenhanced
} else {
  set terminal png size 1100,620 noenhanced
}
set datafile separator whitespace
set key top right
set grid ytics lc rgb "#dddddd"
set border 3
set tics nomirror

# -------------------------------------------------- bytes over PCIe, A vs B
if (system("test -s " . dir . "/plot_bytes.dat && echo 1") eq "1") {
  set output dir . "/ab_bytes.png"
  set title "Bytes over PCIe per run: A = libibp off (every byte copied), B = libibp on"
  set ylabel "MB over PCIe per run (log scale)"
  set logscale y
  set style data histograms
  set style histogram clustered gap 1
  set style fill solid 0.85 border -1
  set boxwidth 0.9
  set xtics rotate by -25 left
  set bmargin 9
  set yrange [*:*]
  plot dir . "/plot_bytes.dat" using 2:xtic(1) title "A: libibp disabled" lc rgb "#9e9e9e", \
       "" using 3 title "B: libibp" lc rgb "#1f77b4", \
       "" using ($0 + 0.18):3:(sprintf("-%.1f%%", 100 * (1 - $3 / $2))) \
          with labels offset 0,0.7 font ",9" notitle
  unset logscale y
  unset bmargin
  set xtics norotate
}

# ------------------------------------------------ speedup vs space saved
if (system("test -s " . dir . "/plot_speedup.dat && echo 1") eq "1") {
  set output dir . "/ab_speedup.png"
  if (gpu) {
    set title "Measured transfer speedup (throughput B / A, CUDA events) vs space saved"
    set ylabel "speedup, measured"
  } else {
    set title sprintf("Modelled transfer speedup (bytes over PCIe A / B; time = bytes / %g GB/s) vs space saved", gbps)
    set ylabel "speedup, modelled (log scale)"
  }
  set xlabel "space saved in the region (libibp statistics: saved_fraction)"
  f = dir . "/plot_speedup.dat"
  stats f using 2 nooutput
  set logscale y
  set xrange [0:1]
  set yrange [0.9:(STATS_max > 1.5 ? STATS_max * 2 : 3)]
  set key top left
  set samples 1000
  ideal(x) = 1 / (1 - x)
  set ytics ("1" 1, "1.25" 1.25, "1.5" 1.5, "2" 2, "3" 3, "5" 5, \
             "10" 10, "20" 20, "50" 50, "100" 100, "200" 200)
  colors = "#d62728 #1f77b4 #ff7f0e #9467bd #8c564b #e377c2 #17becf #7f7f7f"
  n = STATS_records
  labels = system("awk '!/^#/ { print $3 }' " . f . " | tr -d '\"' | tr '\n' ' '")
  plot ideal(x) title "ideal 1/(1 - saved)" lc rgb "#2ca02c" lw 2, \
       0.95 * ideal(x) title "0.95 x ideal (target)" lc rgb "#2ca02c" dt 2, \
       for [i = 0:n - 1] f every ::i::i using 1:2 with points pt 5 + 2 * (i % 5) \
         ps 1.6 lc rgb word(colors, i % 8 + 1) title word(labels, i + 1)
  unset logscale y
  set xrange [*:*]
  set yrange [*:*]
  set ytics autofreq
  unset xlabel
}

# ---------------------------------------------------- codecs: space saved
if (system("test -s " . dir . "/plot_codecs.dat && echo 1") eq "1") {
  set output dir . "/codecs_saved.png"
  set title "Space saved on the same bytes: per row (random access) and, for reference, whole file"
  set ylabel "space saved, %"
  set style data histograms
  set style histogram clustered gap 1
  set style fill solid 0.85 border -1
  set boxwidth 0.9
  set xtics rotate by -25 left
  set bmargin 8
  set key outside right top vertical
  set yrange [-10:100]
  plot dir . "/plot_codecs.dat" using 2:xtic(1) title "ibp (per row)" lc rgb "#1f77b4", \
       "" using 3 title "zstd -1 per row" lc rgb "#ff7f0e", \
       "" using 4 title "zstd -3 per row" lc rgb "#d62728", \
       "" using 5 title "lz4 -1 per row" lc rgb "#9467bd", \
       "" using 6 title "zstd -3 whole file" lc rgb "#ffbb78", \
       "" using 7 title "lz4 -1 whole file" lc rgb "#c5b0d5"
}
