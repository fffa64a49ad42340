// Reading fields of free-form JSON (the machine fingerprint, the training analysis)
// for the reports: a missing field or one of another type reads as absent, never as an exception.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace detaudit::json_fields {

inline const nlohmann::json& get(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}
inline std::string str(const nlohmann::json& j, const char* key, const std::string& fallback = "") {
  const auto& v = get(j, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}
inline long long integer(const nlohmann::json& j, const char* key, long long fallback = 0) {
  const auto& v = get(j, key);
  return v.is_number_integer() ? v.get<long long>() : fallback;
}
inline std::optional<double> number(const nlohmann::json& j, const char* key) {
  const auto& v = get(j, key);
  return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
}
inline bool boolean(const nlohmann::json& j, const char* key) {
  const auto& v = get(j, key);
  return v.is_boolean() && v.get<bool>();
}
inline const nlohmann::json& array(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  const auto& v = get(j, key);
  return v.is_array() ? v : kEmpty;
}
inline const nlohmann::json& object(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const auto& v = get(j, key);
  return v.is_object() ? v : kEmpty;
}
// A field as the history and the machine key read a machine description (whatever an older version wrote): a string
// as it is, absent or null "", any other value its JSON.
inline std::string str_or_json(const nlohmann::json& j, const char* key) {
  const auto& v = get(j, key);
  return v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
}
// A number's integer part; absent or no number: 0.
inline long long int_part(const nlohmann::json& j, const char* key) {
  const auto& v = get(j, key);
  if (!v.is_number()) return 0;
  return v.is_number_float() ? (long long)(v.get<double>()) : v.get<long long>();
}
// Any scalar as text (strings as they are, numbers and booleans as JSON writes them).
inline std::string text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace detaudit::json_fields
