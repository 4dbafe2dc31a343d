# SPDX-License-Identifier: Apache-2.0
#
# The invariant samples of scripts/chaos.sh (test audit N1): each file is one snapshot check,
# "T_MS RC" on its first line and then the violations ("invariant: subject ..."). A violation
# is keyed by its invariant and subject; its streak grows by the time between two readable
# samples in a row that both show it. A sample that could not be read (the check failed: a
# daemon down) neither ends a streak nor adds to it. Prints, one line each:
#   samples N READABLE
#   longest S KEY          (the longest streak of the run, S in seconds; "longest 0 -" if none)
#   persistent S KEY: TEXT (every key whose streak reached LIMIT seconds, with its last text)
# Usage: awk -v limit=SECONDS -f streaks.awk samples/*
function finish(   k, readable) {
  if (!have) return
  readable = (rc == 0 && nv == 0) || (rc == 1 && nv > 0)
  samples++
  if (!readable) { gap = 1; return }
  nreadable++
  for (k in prev) if (!(k in cur)) { delete prev[k]; delete run[k] }
  for (k in cur) {
    if ((k in prev) && !gap) run[k] += (t - prev_t) / 1000
    else if (!(k in prev)) run[k] = 0
    if (run[k] > best[k]) best[k] = run[k]
    prev[k] = 1
    last[k] = text[k]
  }
  for (k in cur) delete cur[k]
  prev_t = t
  gap = 0
}
FNR == 1 {
  finish()
  have = 1; t = $1; rc = $2; nv = 0
  next
}
/^[a-z-]+: / {
  if (match($0, /^[a-z-]+: (pod UID [^ ]+|pod [^ ]+|Slurm job [0-9]+|group [^ ]+)/)) {
    k = substr($0, 1, RLENGTH)
  } else {
    k = $0
  }
  cur[k] = 1; text[k] = $0; nv++
}
END {
  finish()
  printf "samples %d %d\n", samples, nreadable
  top = 0; topk = "-"
  for (k in best) if (best[k] > top) { top = best[k]; topk = k }
  printf "longest %d %s\n", top, topk
  for (k in best) if (best[k] >= limit) printf "persistent %d %s\n", best[k], last[k]
}
