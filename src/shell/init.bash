# cca: `,` continues the latest cca session (or the one $CCA_SESSION names).
# Load it with: eval "$(cca init bash)"
_cca_comma() {
    local status
    command cca search --resume "$@"
    status=$?
    # Globbing was turned off by the alias below so that `?` and `*` reach cca as typed.
    case ${_cca_had_noglob-} in
        1) ;;
        *) set +f ;;
    esac
    unset _cca_had_noglob
    return "$status"
}
# In scripts (no alias expansion), `,` is a plain function.
,() { _cca_comma "$@"; }
# At the prompt, the alias turns globbing off first: `, and on windows?` needs no quotes.
case $- in
    *i*) alias ,='case $- in *f*) _cca_had_noglob=1 ;; *) _cca_had_noglob=0 ;; esac; set -f; _cca_comma' ;;
esac
