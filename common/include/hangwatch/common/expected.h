#pragma once
// A value or an error message that the caller must look at. C++20 has no
// std::expected; this is the small subset the project needs.
#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace hangwatch {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}
  Expected(Error error) : state_(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() {
    assert(ok() && "Expected::value() on an error");
    return std::get<T>(state_);
  }
  const T& value() const {
    assert(ok() && "Expected::value() on an error");
    return std::get<T>(state_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

  const std::string& error() const {
    assert(!ok() && "Expected::error() on a value");
    return std::get<Error>(state_).message;
  }

 private:
  std::variant<T, Error> state_;
};

}  // namespace hangwatch
