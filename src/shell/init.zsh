# cca: `,` continues the latest cca session (or the one $CCA_SESSION names).
# Load it with: eval "$(cca init zsh)"
_cca_comma() {
    command cca search --resume "$@"
}
# noglob: `, and on windows?` needs no quotes.
alias ,='noglob _cca_comma'
