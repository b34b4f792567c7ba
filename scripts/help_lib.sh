# Sourced by scripts/*.sh for their -h/--help.
#
# script_help: prints the running script's opening comment (every line
# after the first up to the first that is not a comment), without its
# comment marks. The whole block, however long it grows: fixed line ranges
# fell behind the comments they cut.
script_help() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
}
