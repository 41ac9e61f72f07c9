"""What workers report over time: GPU memory and the timeline."""
