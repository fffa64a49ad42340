#include "probes/registry.hpp"  // target_environment, make_target_backend: the backend registry
