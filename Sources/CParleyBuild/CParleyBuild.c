#include "CParleyBuild.h"

#ifndef PARLEY_COMMIT
#define PARLEY_COMMIT "unknown"
#endif

const char *parley_build_commit(void) { return PARLEY_COMMIT; }
