# (filled in by the mesh work)
