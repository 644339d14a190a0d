#ifndef CPARLEYBUILD_H
#define CPARLEYBUILD_H

/// The commit the server was built from, as the package manifest saw it (`Context.gitInformation`): the hash, with
/// `-dirty` when the working tree had uncommitted changes; `unknown` outside a git checkout.
const char *parley_build_commit(void);

#endif
