complete --keep-order --exclusive --command cca --arguments "(CCA_COMPLETE=fish cca -- (commandline --current-process --tokenize --cut-at-cursor) (commandline --current-token))"
