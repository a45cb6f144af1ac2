enum ReplayProviderPlaceholder {}
