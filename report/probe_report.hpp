// The probe report: verdict first, then the determinism matrix, bit-identical groups, claimed vs
// observed determinism, kernel attribution, batch invariance, and the machine's fingerprint.
#pragma once
#include <string>

#include "report/document.hpp"
#include "report/results.hpp"

namespace detaudit {

Document build_probe_document(const Results& r);
void add_machine_section(Document& d, const nlohmann::json& machine);

}  // namespace detaudit
