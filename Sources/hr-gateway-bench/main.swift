print("hr-gateway-bench")
