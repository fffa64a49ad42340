// The one path by which the tool opens a file it reads (contract/atomic_file.hpp is the one by which it
// writes): a FIFO, device or directory given as an input is refused in one line instead of hanging.
#pragma once
#include <string>

#include "kernels/status.hpp"

namespace detaudit {

// Opens path for reading without hanging on a FIFO: O_NONBLOCK while opening, then fstat, and anything but
// a regular file (a directory, FIFO, device, socket) is refused with one line naming `what`; the
// descriptor is blocking again when returned. A link is followed (inputs may be links, e.g. a dataset's
// files). A file that does not exist or cannot be read: Status::invalid saying so.
[[nodiscard]] Status open_regular_input(const std::string& path, const std::string& what, int* fd);
// The whole of a regular file (open_regular_input, then read); one larger than an eighth of the memory
// available is refused before anything is allocated.
[[nodiscard]] Status read_regular_file(const std::string& path, const std::string& what, std::string* out);

// What a file is, for messages: "a directory", "a FIFO", ... (st_mode of stat).
const char* file_type_name(unsigned mode);

}  // namespace detaudit
