// The parent project's program (configured, not built, by the subproject test).
#include <herd/mcmc/paradram.h>

int main() { return herd_last_status(); }
