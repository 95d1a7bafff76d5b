#pragma once
// The few symbols the Python reader needs from one ELF file (executable or
// libpython), with the file's first loadable address to compute the load bias.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"

namespace hangwatch::forensics {

struct ElfSymbolTable {
  uint64_t first_load_vaddr = 0;   // lowest PT_LOAD p_vaddr, page aligned
  std::map<std::string, uint64_t> symbols;  // wanted name -> st_value (absent when not defined)
};

// Reads .dynsym and .symtab of `path`; keeps only the names in `wanted`.
// Results are cached per (path, size, mtime): a collector reads the same libpython for every rank.
Expected<ElfSymbolTable> loadElfSymbols(const std::string& path, const std::vector<std::string>& wanted);

}  // namespace hangwatch::forensics
