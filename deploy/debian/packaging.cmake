# The Debian package (cpack -G DEB in the build directory): convoy_<version>_amd64.deb with
# the four binaries in /usr/bin, the systemd units in /lib/systemd/system, the commented
# example configs in /etc/convoy (conffiles), the guide in /usr/share/doc/convoy, and the
# maintainer scripts of deploy/debian (the convoy user, /var/lib/convoy, purge).
set(_deploy ${PROJECT_SOURCE_DIR}/deploy)
install(TARGETS convoy-coordinator convoy-worker convoy RUNTIME DESTINATION bin)
if(TARGET convoy-trainer)
  install(TARGETS convoy-trainer RUNTIME DESTINATION bin)
endif()
# The warm Python's forkserver (convoy-worker --warm-python): /usr/lib/convoy.
install(FILES ${PROJECT_SOURCE_DIR}/worker/exec/convoy-forkserver.py DESTINATION lib/convoy)
install(FILES ${_deploy}/systemd/convoy-coordinator.service ${_deploy}/systemd/convoy-worker.service
  DESTINATION /lib/systemd/system)
install(FILES ${_deploy}/config/coordinator.yaml ${_deploy}/config/worker.yaml
  DESTINATION /etc/convoy)
install(FILES ${_deploy}/README.md ${_deploy}/systemd/convoy-worker.service.d/coordinator.conf.example
  DESTINATION share/doc/convoy)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME convoy)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Convoy")
set(CPACK_PACKAGE_CONTACT "Convoy maintainers <convoy@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed PyTorch training orchestrator")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Debug information stays in the build tree: a fifth of the size, and quicker to pack.
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${_deploy}/debian/conffiles ${_deploy}/debian/postinst ${_deploy}/debian/prerm
  ${_deploy}/debian/postrm)
# Only what install() names goes in (no components of the build tree).
set(CPACK_SOURCE_IGNORE_FILES "/build/;/\\\\.git/")
include(CPack)
