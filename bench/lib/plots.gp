# bench/lib/plots.gp -- the PNG plots of bench/ab.  Called by plots.sh as
#   gnuplot -e "dir='OUT'; term='pngcairo'; gpu=0; profiles='P1 P2'" plots.gp
# Inputs (written by ab_collect.py and codecs_collect.py):
#   plot_bytes.dat    label A_MB B_MB_P1 B_MB_P2 ...      -> ab_bytes.png
#   plot_speedup.dat  saved speedup profile_index line_index label
#                                                         -> ab_speedup.png
#   plot_codecs.dat   data_set ibp zstd1 zstd3 lz4 zstd3_file lz4_file
#                     (space saved, %)                    -> codecs_saved.png

if (term eq 'pngcairo') {
  set terminal pngcairo size 1100,620 font "DejaVu Sans,10" noenhanced
} else {
  set terminal png size 1100,620 noenhanced
}
set datafile separator whitespace
set datafile missing "NaN"
set key top right
set grid ytics lc rgb "#dddddd"
set border 3
set tics nomirror
np = words(profiles)
colors = "#d62728 #1f77b4 #ff7f0e #9467bd #8c564b #e377c2 #17becf #7f7f7f #2ca02c #bcbd22 #393b79 #ad494a"
bcolors = "#1f77b4 #ff7f0e #9467bd #8c564b"
ptypes = "7 9 5 13 11"

# -------------------------------------------------- bytes over PCIe, A vs B
if (system("test -s " . dir . "/plot_bytes.dat && echo 1") eq "1") {
  set output dir . "/ab_bytes.png"
  set title "Bytes over PCIe per run: A = libibp off (every byte copied), B = libibp on, per profile (the gate's choice)"
  set ylabel "MB over PCIe per run (log scale)"
  set logscale y
  set style data histograms
  set style histogram clustered gap 1
  set style fill solid 0.85 border -1
  set boxwidth 0.9
  set xtics rotate by -25 left
  set bmargin 10
  set yrange [*:*]
  plot dir . "/plot_bytes.dat" using 2:xtic(1) title "A: libibp disabled" lc rgb "#9e9e9e", \
       for [k = 1:np] "" using (column(2 + k)) title "B: libibp, " . word(profiles, k) \
         lc rgb word(bcolors, (k - 1) % 4 + 1)
  unset logscale y
  unset bmargin
  set xtics norotate
}

# ------------------------------------------------ speedup vs space saved
if (system("test -s " . dir . "/plot_speedup.dat && echo 1") eq "1") {
  set output dir . "/ab_speedup.png"
  if (gpu) {
    set title "Measured transfer speedup (CUDA events, time A / time B) vs space saved"
    set ylabel "speedup, measured (log scale)"
  } else {
    set title "Modelled transfer speedup (virtual clock on each profile, time A / time B) vs space saved"
    set ylabel "speedup, modelled (log scale)"
  }
  set xlabel "space saved in the region (libibp statistics: saved_fraction)"
  f = dir . "/plot_speedup.dat"
  stats f using 2 nooutput
  ymax = STATS_max
  stats f using 4 nooutput
  nl = int(STATS_max) + 1
  set logscale y
  set xrange [0:1]
  set yrange [0.8:(ymax > 1.5 ? ymax * 2 : 3)]
  set key outside right top vertical
  set samples 1000
  ideal(x) = 1 / (1 - x)
  set ytics ("0.8" 0.8, "0.9" 0.9, "1" 1, "1.25" 1.25, "1.5" 1.5, "2" 2, "3" 3, \
             "5" 5, "10" 10, "20" 20, "50" 50, "100" 100, "200" 200)
  labels = system("awk '!/^#/ && $3 == 0 { print $5 }' " . f . " | tr -d '\"' | tr '\n' ' '")
  plot ideal(x) title "ideal 1/(1 - saved)" lc rgb "#2ca02c" lw 2, \
       0.95 * ideal(x) title "0.95 x ideal (target)" lc rgb "#2ca02c" dt 2, \
       1 / 1.02 title "2 % slower than A (limit)" lc rgb "#d62728" dt 3, \
       for [k = 0:np - 1] NaN with points pt (word(ptypes, k % 5 + 1) + 0) ps 1.6 \
         lc rgb "black" title word(profiles, k + 1), \
       for [k = 0:np - 1] for [i = 0:nl - 1] f using 1:(($3 == k && $4 == i) ? $2 : NaN) \
         with points pt (word(ptypes, k % 5 + 1) + 0) ps 1.6 \
         lc rgb word(colors, i % 12 + 1) title (k == 0 ? word(labels, i + 1) : "")
  unset logscale y
  set xrange [*:*]
  set yrange [*:*]
  set ytics autofreq
  set key top right
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
