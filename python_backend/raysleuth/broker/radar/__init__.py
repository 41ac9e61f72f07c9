"""The hang radar: every worker's stacks grouped, the watch for suspected hangs, and the doctor."""
