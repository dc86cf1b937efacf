
set edit:completion:arg-completer[cca] = { |@words|
    var index = (count $words)
    set index = (- $index 1)

    put (env _CLAP_IFS="\n" _CLAP_COMPLETE_INDEX=(to-string $index) CCA_COMPLETE="elvish" cca -- $@words) | to-lines
}

