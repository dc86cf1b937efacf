# cca: `,` continues the latest cca session (or the one $CCA_SESSION names).
# Load it with: eval "$(cca init bash)"
# Loaded again, the alias below must not rewrite the definitions that follow.
unalias , 2>/dev/null || true
_cca_comma() {
    command cca search --resume "$@"
}
# In scripts (no alias expansion), `,` is a plain function.
function , { _cca_comma "$@"; }
# At the prompt, the alias turns globbing off while the words after `,` are read, so that
# `, and on windows?` needs no quotes. It is one `&&` list, so that `cmd && , q`, `cmd || , q`
# and `, q &` ask only when they should, and globbing is back on as soon as the words are read.
_cca_noglob() {
    # A `,` earlier on the line, in a pipeline, left its `off` here: it stands.
    case ${_cca_glob-}:$- in
        off:*) ;;
        *:*f*) _cca_glob=kept ;;
        *) _cca_glob=off; set -f ;;
    esac
    _cca_armed=1
}
_cca_comma_typed() {
    local piped=${#PIPESTATUS[@]} glob=${_cca_glob-} armed=${_cca_armed-}
    unset _cca_glob _cca_armed
    if [[ $glob == off ]]; then set +f; fi
    if [[ -z $armed ]]; then
        # `cmd | , q` gave its input to the alias's first step, not to cca.
        if ((piped > 1)); then
            echo "cca: \`,\` takes no piped input; pipe it into \`cca search -r\` instead" >&2
            return 2
        fi
        # `cmd || , q` after cmd succeeded: the `||` skipped _cca_noglob, and this goes too.
        return 0
    fi
    _cca_comma "$@"
}
# A `,` in a pipeline reads its words in this shell but runs in another: globbing comes back
# at the next prompt (and after a Ctrl-C there too), the last command's status untouched.
_cca_glob_back() {
    local status=$?
    if [[ ${_cca_glob-} == off ]]; then set +f; fi
    unset _cca_glob _cca_armed
    return "$status"
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
