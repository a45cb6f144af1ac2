enum StdoutSinkPlaceholder {}
