"""Cases: every failure the broker sees (a crash, a suspected hang, a divergence, a memory
case) as one object that names the rank, the step and the line; and their routes."""
