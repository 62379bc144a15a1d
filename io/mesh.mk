# Meshes: readers (io/), generators and topology helpers (engine/).
libdsim_core_la_SOURCES += engine/mesh.c engine/mesh_internal.h
dsiminclude_HEADERS += include/dsim/mesh.h
libdsim_core_la_SOURCES += engine/mesh_gear.c engine/mesh_walker.c
