#include "hangwatch/forensics/python/elf_symbol_table.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <tuple>

#include "hangwatch/common/scoped_fd.h"

namespace hangwatch::forensics {
namespace {

Expected<ElfSymbolTable> readSymbols(const std::string& path, const std::vector<std::string>& wanted) {
  const ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error{"cannot open " + path};
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr);
  if (elf == nullptr) return Error{"not an ELF file: " + path};
  ElfSymbolTable table;
  size_t phnum = 0;
  bool have_load = false;
  if (elf_getphdrnum(elf, &phnum) == 0) {
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
      const uint64_t start = ph.p_vaddr & ~(static_cast<uint64_t>(ph.p_align ? ph.p_align : 4096) - 1);
      if (!have_load || start < table.first_load_vaddr) table.first_load_vaddr = start;
      have_load = true;
    }
  }
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || sh.sh_entsize == 0) continue;
    const size_t count = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr || sym.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (name == nullptr || name[0] == '\0') continue;
      if (std::find(wanted.begin(), wanted.end(), name) != wanted.end()) table.symbols.emplace(name, sym.st_value);
    }
  }
  elf_end(elf);
  if (!have_load) return Error{"no loadable segment in " + path};
  return table;
}

}  // namespace

Expected<ElfSymbolTable> loadElfSymbols(const std::string& path, const std::vector<std::string>& wanted) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error{"cannot stat " + path};
  using Key = std::tuple<std::string, off_t, int64_t, int64_t, std::vector<std::string>>;
  static std::mutex mutex;
  static std::map<Key, ElfSymbolTable> cache;
  Key key{path, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, wanted};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto table = readSymbols(path, wanted);
  if (!table) return table;
  std::lock_guard<std::mutex> lock(mutex);
  cache.emplace(std::move(key), *table);
  return table;
}

}  // namespace hangwatch::forensics
