// MulToShl: `mul x, 2^k` -> `shl x, k`, as a new-pass-manager function pass loaded into `opt`.
// The C++ twin of course_lib/llvm/analysis.py's strength_reduce (02a). Build and run:
//   clang++-19 -shared -fPIC $(llvm-config-19 --cxxflags) MulToShl.cpp -o MulToShl.so
//   opt-19 -load-pass-plugin=./MulToShl.so -passes=mul-to-shl -S in.ll
#include "llvm/IR/Constants.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
// PassInfoMixin gives the pass a name; run() is all the new pass manager needs.
struct MulToShl : PassInfoMixin<MulToShl> {
  PreservedAnalyses run(Function &F, FunctionAnalysisManager &) {
    SmallVector<BinaryOperator *, 8> Todo;  // collect first: erasing while iterating breaks the walk
    for (Instruction &I : instructions(F))
      if (auto *BO = dyn_cast<BinaryOperator>(&I); BO && BO->getOpcode() == Instruction::Mul)
        if (auto *C = dyn_cast<ConstantInt>(BO->getOperand(1)); C && C->getValue().isPowerOf2())
          Todo.push_back(BO);
    for (BinaryOperator *BO : Todo) {
      unsigned K = cast<ConstantInt>(BO->getOperand(1))->getValue().logBase2();
      // No nsw/nuw on the new shl: dropping a poison flag is always correct, keeping it needs a proof.
      auto *Shl = BinaryOperator::CreateShl(BO->getOperand(0), ConstantInt::get(BO->getType(), K),
                                            BO->getName() + ".shl", BO->getIterator());
      BO->replaceAllUsesWith(Shl);  // every user now reads the shl: the step Python could not do
      BO->eraseFromParent();
    }
    errs() << "mul-to-shl: " << F.getName() << ": " << Todo.size() << " rewritten\n";
    // Only instructions changed, not the CFG: analyses about blocks and edges stay valid.
    if (Todo.empty())
      return PreservedAnalyses::all();
    PreservedAnalyses PA;
    PA.preserveSet<CFGAnalyses>();
    return PA;
  }
};
}  // namespace

// opt -load-pass-plugin calls this to learn the pass's name in -passes=...
extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "MulToShl", "1.0", [](PassBuilder &PB) {
            PB.registerPipelineParsingCallback(
                [](StringRef Name, FunctionPassManager &FPM, ArrayRef<PassBuilder::PipelineElement>) {
                  if (Name != "mul-to-shl")
                    return false;
                  FPM.addPass(MulToShl());
                  return true;
                });
          }};
}
