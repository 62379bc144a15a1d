# (filled in by the environments work)
