#!/usr/bin/env bash
# The check-set scripts that transcribe published tables into data/validation/ rebuild the shipped files exactly:
# the JSON a reader audits is what the script (the table rows and their reading) gives, nothing edited by hand.
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data/validation"
status=0
for script in megatron_bridge_2026_check_set megatron_bridge_moe_check_set nemo_long_context_check_set bigscience_zero1_check_set dgxc_grok1_check_set lumi_megatron_check_set megatron_functional_check_set mlperf_training_check_set; do
  out=$(cd "$tmp" && python3 "$root/scripts/$script.py" 2>&1) || { echo "FAIL: $script.py exited non-zero: $out"; status=1; continue; }
  file=$(echo "$out" | sed -n 's/^wrote [0-9]* records to data\/validation\///p')
  if [ -z "$file" ] || ! cmp -s "$tmp/data/validation/$file" "$root/data/validation/$file"; then
    echo "FAIL: $script.py does not rebuild data/validation/${file:-?}"; status=1
  else
    echo "ok: $script.py rebuilds data/validation/$file"
  fi
done
exit $status
