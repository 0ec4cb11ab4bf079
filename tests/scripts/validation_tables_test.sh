#!/usr/bin/env bash
# docs/validation.md's summary tables are the model's figures as scripts/validation_tables.py writes them: in step
# now, a changed figure caught by --check and put back by --write, a document without the markers refused.
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
check() { if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; status=1; fi; }
mkdir -p "$tmp/cache" # the three runs share one set of `tessel validate` outputs
run() { (cd "$root" && python3 scripts/validation_tables.py --tessel "$TESSEL" --cache "$tmp/cache" "$@"); }

run --check docs/validation.md >"$tmp/out" 2>&1; rc=$?
[ $rc -eq 0 ] || cat "$tmp/out"
check "docs/validation.md's tables are the model's figures (else: python3 scripts/validation_tables.py --write docs/validation.md)" $rc

# The shared set's median, altered in a copy: --check fails and says how to mend it; --write mends it.
sed 's/^| all | 85 | \*\*[0-9.]*%\*\*/| all | 85 | **99.9%**/' "$root/docs/validation.md" >"$tmp/doc.md"
cmp -s "$tmp/doc.md" "$root/docs/validation.md"; check "the copy differs" $([ $? -ne 0 ]; echo $?)
run --check "$tmp/doc.md" >"$tmp/out" 2>&1; rc=$?
check "--check exits 1 on a stale figure" $([ $rc -eq 1 ]; echo $?)
grep -q -- "--write" "$tmp/out"; check "--check says to rerun with --write" $?
grep -q -- "-| all | 85 | \*\*99.9%\*\*" "$tmp/out"; check "--check shows the stale row" $?
run --write "$tmp/doc.md" >/dev/null 2>&1; check "--write exits 0" $?
cmp -s "$tmp/doc.md" "$root/docs/validation.md"; check "--write restores the model's figures" $?

# A document without the markers is refused, not appended to.
printf '# no tables here\n' >"$tmp/bare.md"
run --check "$tmp/bare.md" >"$tmp/out" 2>&1; rc=$?
check "no markers: refused" $([ $rc -ne 0 ] && [ $rc -ne 1 ]; echo $?)
grep -q "no '<!-- validation_tables: shared -->' marker" "$tmp/out"; check "no markers: named" $?
exit $status
