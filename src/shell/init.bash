# cca: `,` continues the latest cca session (or the one $CCA_SESSION names).
# Load it with: eval "$(cca init bash)"
_cca_comma() {
    command cca search --resume "$@"
}
# In scripts (no alias expansion), `,` is a plain function.
,() { _cca_comma "$@"; }
# At the prompt, the alias turns globbing off while the words after `,` are read, so that
# `, and on windows?` needs no quotes. It is one `&&` list, so that `cmd && , q`, `cmd || , q`
# and `, q &` ask only when they should, and globbing is back on as soon as the words are read.
_cca_noglob() {
    case $- in
        *f*) _cca_glob=kept ;;
        *) _cca_glob=off; set -f ;;
    esac
}
_cca_comma_typed() {
    local glob=${_cca_glob-}
    unset _cca_glob
    if [[ $glob == off ]]; then set +f; fi
    # `cmd || , q` after cmd succeeded: the `||` skipped _cca_noglob, and this is skipped too.
    if [[ -z $glob ]]; then return 0; fi
    _cca_comma "$@"
}
# A `,` in a pipeline reads its words in this shell but runs in another: globbing comes back
# at the next prompt (and after a Ctrl-C there too).
_cca_glob_back() {
    if [[ ${_cca_glob-} == off ]]; then set +f; fi
    unset _cca_glob
}
case $- in
    *i*)
        alias ,='_cca_noglob && _cca_comma_typed'
        case ${PROMPT_COMMAND-} in
            *_cca_glob_back*) ;;
            *) PROMPT_COMMAND="_cca_glob_back${PROMPT_COMMAND:+; $PROMPT_COMMAND}" ;;
        esac
        ;;
esac
