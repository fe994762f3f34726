"""The Cloud TPU: finding it (resolver), what it is and whether this pipeline can run on it
(topologies, compatibility), and a simulated slice for building TPU graphs without one."""
