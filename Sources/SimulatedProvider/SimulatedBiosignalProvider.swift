enum SimulatedProviderPlaceholder {}
