"""rocketq.store"""
