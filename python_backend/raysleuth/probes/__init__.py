"""What a node can tell about itself without a debugger: its checks (`raysleuth doctor`), its
workers' logs (fatal Ray checks), stacks through py-spy, and GPU memory through NVML."""
