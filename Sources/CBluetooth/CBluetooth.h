// libbluetooth (BlueZ's HCI library, from libbluetooth-dev): controller enumeration for `hr-gateway doctor`.
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
