"""The cluster's breakpoints, logpoints and snapshot points, and the cross-rank tensor table."""
