# cca: `,` continues the latest cca session (or the one $CCA_SESSION names).
# Load it with: cca init fish | source
function , --description 'Continue the latest cca session'
    command cca search --resume $argv
end
