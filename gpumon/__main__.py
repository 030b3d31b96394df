from gpumon.cli import console

console()
