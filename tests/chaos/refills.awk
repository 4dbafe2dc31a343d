# Refills: pods bound into a gang Job's Slurm job beyond the pods it was submitted for, per gang
# (from the schedulers' logs: "submitted Slurm job N for K pod(s)", "bound to ... (Slurm job N)").
match($0, /\] Job\/[^ ]*: submitted Slurm job [0-9]+ for [0-9]+ pod/) {
  split(substr($0, RSTART + 2, RLENGTH - 2), a, " "); sub(/:$/, "", a[1])
  size[a[5]] = a[7]; gang[a[5]] = a[1]
}
match($0, /\] [^ ]*: bound to [^ ]* \(Slurm job [0-9]+\)/) {
  split(substr($0, RSTART + 2, RLENGTH - 3), b, " "); seen[b[7] " " b[1]] = 1
}
END {
  for (k in seen) { split(k, c, " "); bound[c[1]]++ }
  for (j in size) { r = bound[j] - size[j]; if (r > 0) per[gang[j]] += r }
  for (j in gang) gs[gang[j]] = 1
  n = 0; total = 0; min = -1
  for (g in gs) { n++; total += per[g]; if (min < 0 || per[g] < min) min = per[g] }
  printf "%d in %d gangs (fewest in one gang: %d)", total, n, (min < 0 ? 0 : min)
}
