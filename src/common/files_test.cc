// SPDX-License-Identifier: Apache-2.0
#include "common/files.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace sb {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "files_test_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::remove(path_.c_str());
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void Write(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
  std::string path_;
};

TEST_F(FilesTest, ReadsWholeFilesAndSaysWhenItCannot) {
  EXPECT_EQ(ReadWholeFile(path_), std::nullopt);
  Write(std::string("a\0b\nc", 5));
  EXPECT_EQ(ReadWholeFile(path_), std::string("a\0b\nc", 5));
  Write("");
  EXPECT_EQ(ReadWholeFile(path_), "");
}

TEST_F(FilesTest, StampChangesWithTheFile) {
  EXPECT_FALSE(StatFile(path_).exists);
  Write("one");
  const FileStamp first = StatFile(path_);
  EXPECT_TRUE(first.exists);
  EXPECT_EQ(StatFile(path_), first);
  Write("three");  // rewritten in place: another size
  EXPECT_NE(StatFile(path_), first);
  // Replaced by another file (another inode), as Kubernetes swaps secret volumes.
  const FileStamp second = StatFile(path_);
  const std::string other = path_ + ".new";
  std::ofstream(other) << "three";
  ASSERT_EQ(std::rename(other.c_str(), path_.c_str()), 0);
  EXPECT_NE(StatFile(path_), second);
}

}  // namespace
}  // namespace sb
