// EXPECT_PB_ERROR, shared by the C++ tests that check which patchbox::Error a call throws.
#ifndef PATCHBOX_TESTS_EXPECT_ERROR_HPP
#define PATCHBOX_TESTS_EXPECT_ERROR_HPP

#include <gtest/gtest.h>

#include <exception>

#include <patchbox/error.hpp>

/// Expects @p stmt to throw patchbox::Error of @p expected kind.
#define EXPECT_PB_ERROR(stmt, expected)                                          \
  do {                                                                           \
    try {                                                                        \
      stmt;                                                                      \
      ADD_FAILURE() << "no exception from: " #stmt;                              \
    } catch (const patchbox::Error& e_) {                                        \
      EXPECT_EQ(e_.kind(), expected) << e_.what();                               \
    } catch (const std::exception& e_) {                                         \
      ADD_FAILURE() << "not a patchbox::Error from " #stmt ": " << e_.what();    \
    }                                                                            \
  } while (0)

#endif
