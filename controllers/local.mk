# (filled in by the controllers work)
