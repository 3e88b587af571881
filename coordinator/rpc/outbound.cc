#include "coordinator/rpc/outbound.h"

namespace convoy {

grpc::Status ToGrpc(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, status.message()};
    case StatusCode::kNotFound:
      return {grpc::StatusCode::NOT_FOUND, status.message()};
    case StatusCode::kAlreadyExists:
      return {grpc::StatusCode::ALREADY_EXISTS, status.message()};
    case StatusCode::kFailedPrecondition:
      return {grpc::StatusCode::FAILED_PRECONDITION, status.message()};
    case StatusCode::kUnavailable:
      return {grpc::StatusCode::UNAVAILABLE, status.message()};
    case StatusCode::kInternal:
      return {grpc::StatusCode::INTERNAL, status.message()};
    case StatusCode::kUnauthenticated:
      return {grpc::StatusCode::UNAUTHENTICATED, status.message()};
    case StatusCode::kPermissionDenied:
      return {grpc::StatusCode::PERMISSION_DENIED, status.message()};
    case StatusCode::kResourceExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, status.message()};
  }
  return {grpc::StatusCode::UNKNOWN, status.message()};
}

}  // namespace convoy
