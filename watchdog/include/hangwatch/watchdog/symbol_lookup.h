#pragma once
// Finding the definition a caller of an interposed function would have reached.
namespace hangwatch::watchdog {

// dlsym(RTLD_NEXT, name), else the first loaded object, in load order, that defines
// `name` and is not this library: objects opened RTLD_LOCAL are not in the global
// scope RTLD_NEXT searches. An object found that way is kept loaded, so the pointer
// stays valid. nullptr when nothing loaded defines it.
void* findNextDefinition(const char* name);

// How many objects the dynamic loader has loaded so far (dl_iterate_phdr's dlpi_adds):
// a definition missing at one generation stays missing until this changes.
unsigned long long loadedObjectGeneration();

}  // namespace hangwatch::watchdog
