let command = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : ""
switch command {
case "rppg":
    runRPPGBenchmark(arguments: Array(CommandLine.arguments.dropFirst(2)))
default:
    print("""
        usage: hr-gateway-bench BENCHMARK [ARGS]
          rppg [DATA_DIR]   rPPG ROI + POS/CHROM speed at 640x480 and accuracy on synthetic and real data
                            (DATA_DIR: shared/data/rppg, default ../shared/data/rppg)
        """)
}
