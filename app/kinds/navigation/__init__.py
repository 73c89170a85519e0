"""Navigation following (Zhao, Nguyen & Daume 2023): people and listener models follow a
speaker's instruction through a Matterport3D building; their path is scored against the
intended one (success, SPL, nDTW, SDTW, path length).

This package holds the pure navigation core for now, with no database and no web:

- `graph`: connectivity graphs of the buildings, all-pairs shortest paths computed once;
- `metrics`: the DESIGN section 6 metrics of one trajectory against its reference path;
- `formats`: R2R paths, R2R leaderboard predictions, PanGEA pose traces, coop speaker outputs;
- `score`: scoring a predictions file against R2R references (the `proctor nav score` core).

See docs/kinds/navigation.md. The task kind itself is not declared here yet.
"""
